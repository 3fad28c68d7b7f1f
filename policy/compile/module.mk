LIBRARY_DIRS += policy/compile

# The shipped baseline (policy/baseline.cedar) is embedded into the library (dome_baseline_policy_text)
# so that installed binaries need no source tree.
GENERATED += $(BUILD)/gen/policy/compile/baseline_text.h
$(BUILD)/gen/policy/compile/baseline_text.h: policy/baseline.cedar
	@mkdir -p $(@D)
	{ echo '/* generated from policy/baseline.cedar */'; \
	  echo 'static const char dome_baseline_bytes[] = {'; \
	  od -An -v -tx1 $< | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0x00};'; } > $@.tmp && mv $@.tmp $@
