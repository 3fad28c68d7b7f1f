# dome — build, test, bench.  `make` builds $(BUILD)/dome (and $(BUILD)/domed once supervisor/domed exists).
#
# Layout of the build: every folder with a module.mk is a static library
# ($(BUILD)/lib/lib<folder-with-dashes>.a) made of the .c files in that folder.
# A module.mk may add programs (PROGRAMS += name; name_SOURCES := ...), extra
# flags, or test hooks; see docs/contributing.md.
#
# BUILD=dir puts everything in another tree (parallel work, sanitizer build).

.DEFAULT_GOAL := all
BUILD    ?= build
VERSION  ?= 0.1.0
SANITIZE ?= 0
CC       ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif

# Linked from their static archives (the same Debian -dev packages ship them): every `dome run` is a new
# process, and resolving eleven shared libraries cost it about 0.6 ms of loader work plus a larger address
# space for the jail's clone to copy (docs/architecture.md, "Start-up cost"). A security update of one of
# them therefore needs a rebuild of dome, as for any statically linked program.
STATIC_PACKAGES := jansson libzstd libsodium libseccomp libcap libpcre2-8 libnl-3.0 libnl-route-3.0 libbpf yaml-0.1
# Linked as shared libraries: only domed, the gateway client and the session client use them.
SHARED_PACKAGES := libmicrohttpd libcurl libzmq
PACKAGES := $(STATIC_PACKAGES) $(SHARED_PACKAGES)
# Not linked: loaded on first use through supervisor/dlopen/ (their cost at every program start exceeds a
# jail start; see supervisor/dlopen/dlopen.h). Headers only. libnats (fleet mode, supervisor/fleet; Debian's
# libnats-dev ships no static archive) brings libssl, libcrypto and libprotobuf-c: 4-5 ms of every start of
# dome when it was linked. dlopen(3) is in glibc's libc (2.34 and later): no -ldl.
DLOPEN_PACKAGES := libhs libnftables libnats

PKG_CFLAGS := $(shell pkg-config --cflags $(PACKAGES) $(DLOPEN_PACKAGES) 2>/dev/null)
PKG_LIBS   := -Wl,-Bstatic $(filter-out -pthread -lpthread,$(shell pkg-config --libs --static $(STATIC_PACKAGES) 2>/dev/null)) \
              -Wl,-Bdynamic $(shell pkg-config --libs $(SHARED_PACKAGES) 2>/dev/null)

CFLAGS_COMMON := -std=c17 -Wall -Wextra -Werror -D_GNU_SOURCE -g -I. -I$(BUILD)/gen $(PKG_CFLAGS) \
                 -fno-omit-frame-pointer -Wno-missing-field-initializers
ifeq ($(SANITIZE),1)
CFLAGS_COMMON += -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS_COMMON := -fsanitize=address,undefined -Wl,--as-needed
else
CFLAGS_COMMON += -O2
LDFLAGS_COMMON := -Wl,--as-needed
endif
CFLAGS  ?=
LDFLAGS ?=
ALL_CFLAGS  = $(CFLAGS_COMMON) -DDOME_VERSION_STRING=\"$(VERSION)\" $(CFLAGS)
ALL_LDFLAGS = $(LDFLAGS_COMMON) $(LDFLAGS)
LDLIBS_COMMON = $(PKG_LIBS) -lcmocka -lm -lpthread

# ---- libraries: one per folder holding a module.mk ----
MODULE_FILES := $(sort $(wildcard supervisor/*/module.mk policy/module.mk policy/*/module.mk bpf/module.mk tests/*/module.mk))
LIBRARY_DIRS :=
PROGRAMS     :=
UNIT_TESTS   :=
GENERATED    :=
include $(MODULE_FILES)

library_name = $(BUILD)/lib/lib$(subst /,-,$(1)).a
library_sources = $(filter-out $($(subst /,_,$(1))_EXCLUDE),$(wildcard $(1)/*.c))
LIBRARIES := $(foreach d,$(LIBRARY_DIRS),$(call library_name,$(d)))

define library_rule
$(call library_name,$(1)): $(patsubst %.c,$(BUILD)/obj/%.o,$(call library_sources,$(1)))
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(AR) rcs $$@ $$^
endef
$(foreach d,$(LIBRARY_DIRS),$(eval $(call library_rule,$(d))))

# Linked in the order of the Layers table of docs/architecture.md, highest layer first, each archive once:
# a library that calls into one of its own or a higher layer (a cycle) leaves the symbol undefined and
# fails the link. A library missing from the table is left out (and fails the link and check-layers).
LAYER_ORDER := $(shell /usr/bin/python3 scripts/check-layers --link-order)
LINK_LIBRARIES = $(foreach d,$(LAYER_ORDER),$(filter $(call library_name,$(d)),$(LIBRARIES)))

$(BUILD)/obj/%.o: %.c | generated
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $($(subst /,_,$(patsubst %/,%,$(dir $<)))_CFLAGS) -MMD -MP -c $< -o $@

# ---- programs ----
PROGRAMS += dome
dome_SOURCES := $(wildcard supervisor/cli/*.c)
ifneq ($(wildcard supervisor/domed/*.c),)
PROGRAMS += domed
domed_SOURCES := $(wildcard supervisor/domed/*.c)
endif

# name_LDLIBS (a module.mk's): shared libraries of that program alone, searched before the archives, so that
# what they define is taken from them and not from an archive (dome-fleet-tool: libnats itself rather than
# supervisor/dlopen's forwarders).
define program_rule
$(BUILD)/$(1): $(patsubst %.c,$(BUILD)/obj/%.o,$($(1)_SOURCES)) $(LIBRARIES)
	@mkdir -p $$(@D)
	$$(CC) $$(ALL_LDFLAGS) -o $$@ $(patsubst %.c,$(BUILD)/obj/%.o,$($(1)_SOURCES)) $($(1)_LDLIBS) $$(LINK_LIBRARIES) $$(LDLIBS_COMMON)
endef
$(foreach p,$(PROGRAMS),$(eval $(call program_rule,$(p))))

# ---- unit tests: tests/unit/<area>/test_*.c, one cmocka program each ----
UNIT_TEST_SOURCES := $(wildcard tests/unit/*/test_*.c)
UNIT_TESTS += $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_TEST_SOURCES))
$(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(LIBRARIES)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(LINK_LIBRARIES) $(LDLIBS_COMMON)
# kept (not removed as intermediates of the pattern rule), so that a second `make test` relinks nothing
.SECONDARY: $(patsubst tests/unit/%.c,$(BUILD)/obj/tests/unit/%.o,$(UNIT_TEST_SOURCES))

.PHONY: all generated unit-tests test test-quick asan bench demo format format-check clean install deb difftest fuzz vmtest check-layers
all: $(addprefix $(BUILD)/,$(PROGRAMS))
generated: $(GENERATED)
unit-tests: $(UNIT_TESTS)

asan:
	$(MAKE) BUILD=$(BUILD)/asan SANITIZE=1 all unit-tests

# `make test`: the whole set-up on a fresh machine (Debian packages and the tests' Node
# dev-dependencies through scripts/install-deps, idempotent), the build, the sanitizer build, and
# every suite; ends with `N skipped` and then `N passed, N failed`.
test:
	scripts/install-deps
	$(MAKE) all unit-tests
	$(MAKE) asan
	tests/run --build $(BUILD)

test-quick: all unit-tests
	tests/run --build $(BUILD) --no-asan

bench: all
	scripts/bench --build $(BUILD)

# `make demo`: scripts/demo, whose first line says where its domed keeps state ($(BUILD)/demo/).
demo:
	@BUILD=$(BUILD) scripts/demo

vmtest: all
	scripts/vmtest --build $(BUILD)

# Differential tests against the reference Cedar implementation (cedar-wasm): 100,000 random cases.
difftest: all
	tests/difftest/run --build $(BUILD) --cases 100000

# libFuzzer targets (policy parser, EST, entities, schema) under ASan+UBSan, 10 minutes each.
fuzz:
	tests/fuzz/run --build $(BUILD) --seconds 600

# The layering of docs/architecture.md: includes, and the prefixes of the archives' global symbols.
check-layers: all
	scripts/check-layers --build $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')

# `make install`: the programs, manual pages, the systemd unit (its paths rewritten to this PREFIX), the
# tmpfiles.d entry for /run/dome and /var/lib/dome, the operator documentation, and /etc/dome/domed.conf
# (the commented default; an existing file is kept). DESTDIR is honoured.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
SBINDIR     ?= $(PREFIX)/sbin
MANDIR      ?= $(PREFIX)/share/man
DOCDIR      ?= $(PREFIX)/share/doc/dome
UNITDIR     ?= $(PREFIX)/lib/systemd/system
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
SYSCONFDIR  ?= /etc
install: all
	install -D -m 0755 $(BUILD)/dome $(DESTDIR)$(BINDIR)/dome
	install -D -m 0755 $(BUILD)/domed $(DESTDIR)$(SBINDIR)/domed
	install -D -m 0644 docs/man/dome.1 $(DESTDIR)$(MANDIR)/man1/dome.1
	install -D -m 0644 docs/man/domed.8 $(DESTDIR)$(MANDIR)/man8/domed.8
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed -e 's|/usr/local/sbin/domed|$(SBINDIR)/domed|g' -e 's|/usr/local/share/doc/dome|$(DOCDIR)|g' \
	    -e 's|/etc/dome/domed.conf|$(SYSCONFDIR)/dome/domed.conf|g' docs/domed.service >$(DESTDIR)$(UNITDIR)/domed.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/domed.service
	install -D -m 0644 docs/dome-tmpfiles.conf $(DESTDIR)$(TMPFILESDIR)/dome.conf
	install -D -m 0644 docs/domed.md $(DESTDIR)$(DOCDIR)/domed.md
	install -D -m 0644 docs/operator.md $(DESTDIR)$(DOCDIR)/operator.md
	if [ ! -e $(DESTDIR)$(SYSCONFDIR)/dome/domed.conf ]; then \
	  install -D -m 0644 docs/domed.conf $(DESTDIR)$(SYSCONFDIR)/dome/domed.conf; fi

# `make deb`: the Debian package of this build tree (debian/rules reuses $(BUILD) as it is), into
# $(BUILD)/deb/ with its .buildinfo and .changes. Needs debhelper and dpkg-dev (scripts/install-deps).
DEB_DIR = $(abspath $(BUILD))/deb
deb: all
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)
	DOME_BUILD=$(abspath $(BUILD)) DOME_DEB_DIR=$(DEB_DIR) dpkg-buildpackage -us -uc -b \
	  --buildinfo-file=$(DEB_DIR)/dome.buildinfo --buildinfo-option=-u$(DEB_DIR) \
	  --changes-file=$(DEB_DIR)/dome.changes --changes-option=-u$(DEB_DIR)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
