# domed is a program (built by the top Makefile from supervisor/domed/*.c), not a library.
# The Dome Cedar schema is embedded so that an installed domed needs no source tree.
GENERATED += $(BUILD)/gen/supervisor/domed/dome_schema.h
$(BUILD)/gen/supervisor/domed/dome_schema.h: policy/schema/dome.cedarschema
	@mkdir -p $(@D)
	{ echo '/* generated from policy/schema/dome.cedarschema */'; \
	  echo 'static const char dome_schema_text[] = {'; \
	  od -An -v -tx1 $< | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0x00};'; } > $@.tmp && mv $@.tmp $@
