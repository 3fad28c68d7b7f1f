LIBRARY_DIRS += supervisor/guards

# log2 of whole numbers for the entropy validator, computed at build time (supervisor/guards/generate/) so
# that dome does not load libm; tests/unit/guards/test_entropy checks the result against libm.
$(BUILD)/guards-log2-generate: supervisor/guards/generate/log2_table.c supervisor/guards/entropy.h
	@mkdir -p $(@D)
	$(CC) -std=c17 -O2 -Wall -Wextra -Werror -I. -o $@ supervisor/guards/generate/log2_table.c -lm

$(BUILD)/gen/guards_log2_table.h: $(BUILD)/guards-log2-generate
	@mkdir -p $(@D)
	$(BUILD)/guards-log2-generate $@.tmp && mv $@.tmp $@

GENERATED += $(BUILD)/gen/guards_log2_table.h
