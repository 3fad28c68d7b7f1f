LIBRARY_DIRS += policy/schema

# The shipped Dome schema is embedded into the library (cedar_schema_load_dome) so that installed
# binaries need no source tree.
GENERATED += $(BUILD)/gen/policy/schema/dome_schema_text.h
$(BUILD)/gen/policy/schema/dome_schema_text.h: policy/schema/dome.cedarschema
	@mkdir -p $(@D)
	{ echo '/* generated from policy/schema/dome.cedarschema */'; \
	  echo 'static const char dome_schema_bytes[] = {'; \
	  od -An -v -tx1 $< | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0x00};'; } > $@.tmp && mv $@.tmp $@
