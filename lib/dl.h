/*
 * Libraries loaded when a feature is configured, not at start (dlopen): libcurl for the HTTP
 * client, libfreeipmi for powerd's ipmi source, NVML for its GPU source. A daemon that never
 * talks HTTP or IPMI maps none of them, nor the twenty libraries libcurl brings in.
 */
#ifndef WB_DL_H
#define WB_DL_H

#include <stdbool.h>
#include <stddef.h>

struct wb_dl_sym {
	void *fn;	 /* the address of a function pointer (or a data pointer) to fill */
	const char *sym; /* its symbol in the library */
	bool required;	 /* without it the library is refused; optional ones are left NULL */
};

/*
 * dlopen(path) and resolve every symbol of syms. The handle, or NULL with why: "cannot load PATH
 * (the loader's reason)" or "PATH has no SYMBOL". Symbols resolve as a linked library's would: one
 * a preloaded library (LD_PRELOAD) defines is taken from there. The handle stays open for the
 * process's life unless the caller dlcloses it.
 */
void *wb_dl_open(const char *path, const struct wb_dl_sym *syms, size_t n, char *why,
		 size_t whylen);

#endif
