# bpf/: CO-RE programs built with clang -target bpf against a vmlinux.h generated from the running
# kernel's BTF, turned into a libbpf skeleton ($(BUILD)/gen/dome.skel.h) that supervisor/kernel/ includes.
# Not a library folder: *.bpf.c are never compiled by the host compiler.
BPF_CLANG ?= clang
BPFTOOL ?= bpftool
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_x86 -I. -I$(BUILD)/gen -Wall -Werror -Wno-unused-function

$(BUILD)/gen/vmlinux.h:
	@mkdir -p $(@D)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/dome.bpf.o: bpf/dome.bpf.c $(wildcard bpf/*.h) $(BUILD)/gen/vmlinux.h
	@mkdir -p $(@D)
	$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@.tmp.o && $(BPFTOOL) gen object $@ $@.tmp.o && rm -f $@.tmp.o

$(BUILD)/gen/dome.skel.h: $(BUILD)/gen/dome.bpf.o
	$(BPFTOOL) gen skeleton $< name dome_bpf > $@.tmp && mv $@.tmp $@

GENERATED += $(BUILD)/gen/vmlinux.h $(BUILD)/gen/dome.skel.h
