# wattbus: one Makefile, no recursion. `make`, `make check`, `make run`,
# `make install` (PREFIX, DESTDIR), `make bench`, `make fuzz`, `make image`, `make clean`;
# V=1 shows the commands, SANITIZE=1 builds with ASan+UBSan into build-san/.

.DELETE_ON_ERROR:
.SUFFIXES:
.SECONDEXPANSION:

VERSION := 0.1.0
SANITIZE ?=
BUILD ?= build$(if $(SANITIZE),-san)
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/lib/wattbus
DATADIR ?= $(PREFIX)/share/wattbus
MANDIR ?= $(PREFIX)/share/man
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/systemd/system,$(PREFIX)/lib/systemd/system)
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d

CC ?= cc
CLANG ?= clang
BPFTOOL ?= bpftool
PYTHON ?= python3
PKG_CONFIG ?= pkg-config

ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = @printf '  %-8s %s\n' $(1) $(2);
endif

PKGS := libczmq libzmq msgpack jansson inih libsystemd
PKGS_exportd := libmicrohttpd zlib
PKGS_modeld := libmicrohttpd libzip jansson
PKGS_usaged := libbpf libelf zlib
# Loaded when a setting needs them (lib/dl.h), not linked: libcurl (lib/httpc.c: Redfish, the
# kubelet, a model server) and libfreeipmi (powerd's ipmi source). Their headers are built
# against; their sonames come from the development packages' links.
DLOPEN_PKGS := libcurl libfreeipmi
ALL_PKGS := $(PKGS) libmicrohttpd zlib libbpf libelf libzip $(DLOPEN_PKGS)

# Build dependencies (Debian packages): `make run`, `make check`, `make bench` and
# `make deps` install what is missing; any other goal (plain `make`, a packager's
# build in a chroot) only says what is missing and stops.
INSTALL_GOALS := run check bench deps
ifeq ($(filter clean format format-check uninstall deps,$(MAKECMDGOALS)),)
ifneq ($(shell $(PKG_CONFIG) --exists $(ALL_PKGS) 2>/dev/null && command -v $(CLANG) $(BPFTOOL) $(PYTHON) >/dev/null && echo ok),ok)
ifneq ($(filter $(INSTALL_GOALS),$(MAKECMDGOALS)),)
$(info wattbus: build dependencies missing, running scripts/deps.sh build)
ifneq ($(shell scripts/deps.sh build >&2; echo $$?),0)
$(error scripts/deps.sh build failed; see above)
endif
else
MISSING_DEPS := $(strip $(shell scripts/deps.sh missing build) $(foreach t,$(CLANG) $(BPFTOOL) $(PYTHON),$(if $(shell command -v $(t)),,$(t))))
$(error build dependencies missing: $(or $(MISSING_DEPS),pkg-config cannot find $(ALL_PKGS)); install them with `make deps` (or scripts/deps.sh build, as root))
endif
endif
endif
pkg_cflags = $(if $(strip $(1)),$(shell $(PKG_CONFIG) --cflags $(1)))
pkg_libs = $(if $(strip $(1)),$(shell $(PKG_CONFIG) --libs $(1)))
# The soname of LIB (libcurl, libfreeipmi): what its development link libLIB.so points at.
soname = $(shell readelf -d $$($(PKG_CONFIG) --variable=libdir $(1))/$(1).so 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
DLOPEN_DEFS := $(if $(filter clean format format-check uninstall deps,$(MAKECMDGOALS)),,-DWB_LIBCURL='"$(call soname,libcurl)"' -DWB_LIBFREEIPMI='"$(call soname,libfreeipmi)"')

CFLAGS ?= -O2 -g
WARNINGS := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Wformat=2 -Wno-format-nonliteral
comma := ,
SAN_FLAGS := $(if $(SANITIZE),-fsanitize=address$(comma)undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
ALL_CFLAGS := -std=gnu11 $(WARNINGS) $(CFLAGS) $(SAN_FLAGS) -MMD -MP -D_GNU_SOURCE \
	-DWB_VERSION='"$(VERSION)"' -DWB_DATADIR='"$(DATADIR)"' -DWB_SYSCONFDIR='"$(SYSCONFDIR)"' -Ilib -I$(BUILD)/gen -I$(BUILD)/bpf $(call pkg_cflags,$(ALL_PKGS)) $(DLOPEN_DEFS)
ALL_LDFLAGS := $(LDFLAGS) $(SAN_FLAGS) -Wl,--as-needed
LIBS := $(call pkg_libs,$(PKGS)) -lm -ldl

STAGES := powerd usaged alignd estimd exportd modeld operator

# ---- shared library ----
GEN_H := $(BUILD)/gen/wb_msgs.h
GEN_C := $(BUILD)/gen/wb_msgs.c
LIB_SRCS := $(wildcard lib/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/gen/wb_msgs.o
LIBWB := $(BUILD)/libwattbus.a

all: $(LIBWB)

$(GEN_H) $(GEN_C) &: $(wildcard schemas/*.json) tools/schemagen.py
	$(call say,GEN,$(GEN_H))
	$(Q)mkdir -p $(BUILD)/gen
	$(Q)$(PYTHON) tools/schemagen.py schemas $(GEN_H) $(GEN_C)

$(LIBWB): $(LIB_OBJS)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# Objects depend on the paths compiled into them: a new PREFIX rebuilds them.
FLAGS_FILE := $(BUILD)/gen/paths.flags
FLAGS_NOW := $(VERSION) $(DATADIR) $(SYSCONFDIR) $(CFLAGS) $(SANITIZE) $(DLOPEN_DEFS)
$(FLAGS_FILE): FORCE | $(BUILD)/gen/.dir
	@echo '$(FLAGS_NOW)' | cmp -s - $@ || echo '$(FLAGS_NOW)' > $@
FORCE:

$(BUILD)/%.o: %.c $(GEN_H) $(FLAGS_FILE) | $$(@D)/.dir
	$(call say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/gen/wb_msgs.o: $(GEN_C) $(GEN_H)
	$(call say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

%/.dir:
	$(Q)mkdir -p $(@D) && touch $@
.PRECIOUS: %/.dir

# ---- BPF (usaged) ----
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_SKELS := $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/bpf/%.skel.h)
# vmlinux.h: the checked-in bpf/vmlinux.h when present (builds anywhere), else from this kernel's BTF.
VMLINUX_H := $(if $(wildcard bpf/vmlinux.h),bpf/vmlinux.h,$(BUILD)/bpf/vmlinux.h)
BPF_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

$(BUILD)/bpf/vmlinux.h: | $(BUILD)/bpf/.dir
	$(call say,BTF,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(VMLINUX_H) $(wildcard bpf/*.h) | $(BUILD)/bpf/.dir
	$(call say,BPF,$<)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -I$(dir $(VMLINUX_H)) -Ibpf -c $< -o $@
	$(Q)llvm-strip -g $@ 2>/dev/null || true

.SECONDARY: $(BPF_SRCS:bpf/%.bpf.c=$(BUILD)/bpf/%.bpf.o)
$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(call say,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

# ---- daemons: <stage>/main.c plus the stage's modules ----
# wattbus-operator renders from deploy/kubernetes itself and the WattBus CRD, embedded here.
operator_GEN_OBJS := $(BUILD)/gen/operator_bundle.o
$(BUILD)/gen/operator_bundle.c: operator/embed.py deploy/kubernetes/*.yaml deploy/operator/crd.yaml | $(BUILD)/gen/.dir
	$(call say,GEN,$@)
	$(Q)$(PYTHON) operator/embed.py deploy/kubernetes deploy/operator/crd.yaml $@
$(BUILD)/gen/operator_bundle.o: $(BUILD)/gen/operator_bundle.c
	$(call say,CC,$<)
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

define stage_rules
$(1)_SRCS := $(wildcard $(1)/*.c)
$(1)_OBJS := $$(patsubst %.c,$(BUILD)/%.o,$$(filter-out $(1)/main.c,$$($(1)_SRCS))) $$($(1)_GEN_OBJS)
$(1)_LIBS := $$(call pkg_libs,$$(PKGS_$(1)))
$$($(1)_OBJS) $(BUILD)/$(1)/main.o: $(if $(filter usaged,$(1)),$(BPF_SKELS))
ifneq ($(wildcard $(1)/main.c),)
BINS += $(BUILD)/wattbus-$(1)
$(BUILD)/wattbus-$(1): $(BUILD)/$(1)/main.o $$($(1)_OBJS) $(LIBWB)
	$$(call say,LD,$$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $$@ $$^ $$($(1)_LIBS) $(LIBS)
endif
endef
$(foreach s,$(STAGES),$(eval $(call stage_rules,$(s))))
# modeld's POST /train fits with estimd's own trainer (estimd/train.c), as wattbus train does;
# libwattbus comes again after estimd's objects, which use it.
$(BUILD)/wattbus-modeld: $(estimd_OBJS)
modeld_OBJS += $(estimd_OBJS)
modeld_LIBS += $(estimd_LIBS) $(LIBWB)

# ---- the wattbus CLI ----
CLI_SRCS := $(wildcard cli/*.c)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)
BINS += $(BUILD)/wattbus
# doctor and probe run powerd's own sources (powerd/sources.c), doctor usaged's BPF probe;
# compare aligns with alignd's curves; train fits with estimd's own trainer (estimd/train.c).
$(BUILD)/wattbus: $(CLI_OBJS) $(powerd_OBJS) $(alignd_OBJS) $(BUILD)/usaged/bpfprobe.o $(estimd_OBJS) $(LIBWB)
	$(call say,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(powerd_LIBS) $(LIBS)

all: $(BINS)

# ---- tests ----
# tests/unit/test_<stage>_*.c link the stage's modules; the others only libwattbus.
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
# tests/unit/test_cli_*.c link the CLI's pure modules.
cli_OBJS := $(BUILD)/cli/series.o $(BUILD)/cli/flags.o
test_stage = $(filter $(STAGES) cli,$(firstword $(subst _, ,$(1))))
test_objs = $(foreach s,$(call test_stage,$(1)),$($(s)_OBJS))
test_libs = $(foreach s,$(call test_stage,$(1)),$($(s)_LIBS))
# vmpub's totals (test_cli_vmtotals)
cli_OBJS += $(BUILD)/cli/vmtotals.o

$(BUILD)/tests/test_%: tests/unit/test_%.c tests/unit/unit.h $$(call test_objs,$$*) $(LIBWB) | $(BUILD)/tests/.dir
	$(call say,TEST,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/unit $(ALL_LDFLAGS) -o $@ $< $(call test_objs,$*) $(LIBWB) \
		$(call test_libs,$*) $(LIBS)

# A stand-in BMC preloaded into powerd by powerd_ipmi.bats (libfreeipmi's calls answered in-process).
IPMI_STANDIN := $(BUILD)/tests/libipmi_standin.so
$(IPMI_STANDIN): tests/bats/ipmi_standin.c | $(BUILD)/tests/.dir
	$(call say,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -shared -Wno-unused-parameter -o $@ $< $(call pkg_libs,libfreeipmi)

# A stand-in libnvidia-ml.so for powerd's nvml source (tests/fake_nvml.c): scripted GPUs.
FAKE_NVML := $(BUILD)/tests/libfake-nvml.so
$(FAKE_NVML): tests/fake_nvml.c | $(BUILD)/tests/.dir
	$(call say,CC,$@)
	$(Q)$(CC) -std=gnu11 $(WARNINGS) $(CFLAGS) -fPIC -shared -o $@ $<
all: $(FAKE_NVML)
$(BUILD)/tests/test_powerd_nvml: $(FAKE_NVML)

check: deps-test format-check man-check all $(UNIT_BINS) $(IPMI_STANDIN)
	$(Q)WB_BUILD=$(abspath $(BUILD)) tests/run.sh $(abspath $(UNIT_BINS))

# ---- fuzzing (clang libFuzzer + ASan/UBSan; not part of check; .ci/run builds them) ----
FUZZ_TIME ?= 300
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -DWB_VERSION='"$(VERSION)"' \
	-DWB_DATADIR='"$(DATADIR)"' -DWB_SYSCONFDIR='"$(SYSCONFDIR)"' \
	-Ilib -I$(BUILD)/gen -I$(BUILD)/bpf $(call pkg_cflags,$(ALL_PKGS)) $(DLOPEN_DEFS)
fuzz_stage = $(filter $(STAGES),$(firstword $(subst _, ,$(1))))
# A target's sources: its stage's modules, and those of the stages it links as its binary does
# (modeld's POST /train fits with estimd's trainer).
fuzz_with_modeld := estimd
fuzz_srcs = $(foreach s,$(call fuzz_stage,$(1)) $(fuzz_with_$(call fuzz_stage,$(1))),$(filter-out %/main.c,$(wildcard $(s)/*.c)))
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(LIB_SRCS) $(GEN_C) $(GEN_H) $$(call fuzz_srcs,$$*) | $(BUILD)/fuzz/.dir
	$(call say,FUZZ,$@)
	$(Q)$(CLANG) $(FUZZ_FLAGS) -o $@ $< $(LIB_SRCS) $(GEN_C) $(call fuzz_srcs,$*) \
		$(call pkg_libs,$(ALL_PKGS)) $(LIBS)

fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	$(Q)for f in $(FUZZ_BINS); do \
		n=$$(basename $$f); mkdir -p fuzz-corpus/$$n; \
		echo "fuzz: $$n for $(FUZZ_TIME) s"; \
		seeds=tests/fuzz/seeds/$$n; [ -d $$seeds ] || seeds=; \
		$$f -max_total_time=$(FUZZ_TIME) -print_final_stats=1 fuzz-corpus/$$n $$seeds || exit 1; \
	done

# ---- benchmarks ----
# What a program linking a stage's modules needs, for bench/*.sh: make -s libs-exportd
libs-%:
	@echo $(call pkg_libs,$(PKGS_$*)) $(LIBS)

bench: deps-test all
	$(Q)WB_BUILD=$(abspath $(BUILD)) bench/run.sh

# ---- running it ----
run: all
	$(Q)WB_BUILD=$(abspath $(BUILD)) scripts/run.sh

deps-test:
	$(Q)scripts/deps.sh test

deps:
	$(Q)scripts/deps.sh test

# ---- install ----
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(DATADIR)/schemas \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/wattbus
	install -m 0755 $(BUILD)/wattbus $(DESTDIR)$(BINDIR)/wattbus
	for b in $(filter-out $(BUILD)/wattbus,$(BINS)); do install -m 0755 $$b $(DESTDIR)$(LIBEXECDIR)/; done
	install -m 0644 schemas/*.json schemas/README.md $(DESTDIR)$(DATADIR)/schemas/
	$(if $(wildcard man/*.1),install -m 0644 man/*.1 $(DESTDIR)$(MANDIR)/man1/)
	$(if $(wildcard man/*.8),install -m 0644 man/*.8 $(DESTDIR)$(MANDIR)/man8/)
	$(if $(wildcard systemd/*.service systemd/*.target),for u in systemd/*.service systemd/*.target; do \
		sed -e 's|@LIBEXECDIR@|$(LIBEXECDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' -e 's|@BINDIR@|$(BINDIR)|g' $$u \
		> $(DESTDIR)$(UNITDIR)/$$(basename $$u); chmod 0644 $(DESTDIR)$(UNITDIR)/$$(basename $$u); done)
	install -D -m 0644 systemd/wattbus.tmpfiles $(DESTDIR)$(TMPFILESDIR)/wattbus.conf
	install -D -m 0644 systemd/wattbus.sysusers $(DESTDIR)$(SYSUSERSDIR)/wattbus.conf
	$(if $(wildcard data/models/*),install -d $(DESTDIR)$(DATADIR)/models && install -m 0644 data/models/* $(DESTDIR)$(DATADIR)/models/)
	test -e $(DESTDIR)$(SYSCONFDIR)/wattbus/wattbus.conf || \
		{ tools/genconf.sh $(BUILD) > $(DESTDIR)$(SYSCONFDIR)/wattbus/wattbus.conf && \
		  chmod 0644 $(DESTDIR)$(SYSCONFDIR)/wattbus/wattbus.conf; }

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/wattbus
	rm -rf $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(DATADIR)
	rm -f $(DESTDIR)$(MANDIR)/man1/wattbus*.1 $(DESTDIR)$(MANDIR)/man8/wattbus*.8
	rm -f $(DESTDIR)$(UNITDIR)/wattbus*.service $(DESTDIR)$(UNITDIR)/wattbus.target
	rm -f $(DESTDIR)$(TMPFILESDIR)/wattbus.conf $(DESTDIR)$(SYSUSERSDIR)/wattbus.conf
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/wattbus/wattbus.conf (remove it by hand if you want)"

# ---- the container image (podman; not part of check) ----
# The libraries loaded on demand, which ldd does not list (paths): scripts/image.sh adds them.
dlopen-libs:
	@echo $(foreach l,$(DLOPEN_PKGS),$(shell $(PKG_CONFIG) --variable=libdir $(l))/$(call soname,$(l)))

image:
	$(Q)scripts/image.sh $(IMAGE)

# Every C file of the tree, in .clang-format's style (clang-format 14, Debian 12's): `make format`
# applies it, `make format-check` (part of check) fails on a file that is not in it.
FORMAT_SRCS := $(wildcard lib/*.[ch] cli/*.[ch] $(STAGES:%=%/*.[ch]) bpf/*.[ch] bench/*.[ch] \
	tests/*.[ch] tests/unit/*.[ch] tests/fuzz/*.[ch] tests/bats/*.[ch])
format:
	clang-format -i $(FORMAT_SRCS)
format-check:
	$(Q)clang-format --dry-run -Werror $(FORMAT_SRCS) || \
		{ echo "format-check: the files above are not in .clang-format's style; make format fixes them" >&2; exit 1; }

# Every man page renders with no troff warning (-ww: all of them), as man(1) would show it: a
# line that troff takes for a request (one starting with '.' or ') loses its text silently.
MAN_PAGES := $(wildcard man/*.[1-8])
man-check:
	$(Q)bad=0; for m in $(MAN_PAGES); do \
		out=$$(groff -Tutf8 -ww -z -man "$$m" 2>&1); \
		[ -z "$$out" ] || { echo "$$out" >&2; bad=1; }; \
	done; \
	[ $$bad -eq 0 ] || { echo "man-check: the man pages above have troff warnings" >&2; exit 1; }

clean:
	rm -rf build build-san

conf: all
	tools/genconf.sh $(BUILD) > docs/wattbus.conf

.PHONY: FORCE image dlopen-libs conf all check fuzz fuzz-build bench run deps deps-test install uninstall format format-check man-check clean

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
