/*
 * Whether usaged's eBPF source can run here: kernel BTF for its CO-RE program
 * and the privileges to load it. One probe for usaged (at start, mode auto or
 * bpf) and `wattbus doctor` (which links this file), so that both give the
 * same reasons and the same advice.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "usaged.h"

#define CAP_SYS_ADMIN_BIT 21
#define CAP_PERFMON_BIT 38
#define CAP_BPF_BIT 39

bool usaged_bpf_probe(const char *sys_root, const char *status_path, const char *kernel_release,
		      struct usaged_bpf_probe *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->btf, sizeof(p->btf), "%s/kernel/btf/vmlinux", sys_root);
	p->have_btf = access(p->btf, R_OK) == 0;

	unsigned long long eff = 0;
	char line[256];
	FILE *f = fopen(status_path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	if (f)
		fclose(f);
	p->sys_admin = eff & (1ull << CAP_SYS_ADMIN_BIT);
	p->bpf_perfmon = (eff & (1ull << CAP_BPF_BIT)) && (eff & (1ull << CAP_PERFMON_BIT));

	int major = 0, minor = 0;
	sscanf(kernel_release ? kernel_release : "", "%d.%d", &major, &minor);
	bool new_enough = major > 5 || (major == 5 && minor >= 8);

	if (!p->have_btf) {
		snprintf(p->why, sizeof(p->why), "no kernel BTF (%s; needs CONFIG_DEBUG_INFO_BTF)",
			 p->btf);
		snprintf(
		    p->fix, sizeof(p->fix),
		    "a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian's is, since 5.10): usaged's CO-RE program needs it");
		return false;
	}
	if (!p->sys_admin && !p->bpf_perfmon) {
		snprintf(p->why, sizeof(p->why), "not root (uid %u, needs CAP_BPF and CAP_PERFMON)",
			 (unsigned)geteuid());
		snprintf(
		    p->fix, sizeof(p->fix),
		    "run usaged as root or with CAP_BPF and CAP_PERFMON%s: wattbus-usaged.service grants exactly those",
		    new_enough ? "" : " (kernels before 5.8: CAP_SYS_ADMIN)");
		return false;
	}
	return true;
}
