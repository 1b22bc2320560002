/* Libraries loaded on demand (dl.h). */
#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *wb_dl_open(const char *path, const struct wb_dl_sym *syms, size_t n, char *why, size_t whylen)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(why, whylen, "cannot load %s (%s)", path, e ? e : "not found");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		/* As a linked library's would: a preloaded library (LD_PRELOAD) interposes. */
		void *p = dlsym(RTLD_DEFAULT, syms[i].sym);
		if (!p)
			p = dlsym(lib, syms[i].sym);
		memcpy(syms[i].fn, &p, sizeof(p)); /* object pointer to function pointer */
		if (!p && syms[i].required) {
			snprintf(why, whylen, "%s has no %s", path, syms[i].sym);
			for (size_t j = 0; j <= i; j++)
				memset(syms[j].fn, 0, sizeof(void *));
			dlclose(lib);
			return NULL;
		}
	}
	return lib;
}
