# supervisor/console — the console's operator sessions, login rate limit, security headers, the alerts
# and per-minute calls its views show, and its web files built into the binary (public header
# console.h, docs/console.md). The files under console/ become one generated header of byte arrays:
# nothing to install, nothing fetched at run time.
LIBRARY_DIRS += supervisor/console
CONSOLE_ASSET_FILES := $(sort $(wildcard console/*.html console/*.css console/*.js console/js/*.js))
GENERATED += $(BUILD)/gen/supervisor/console/console_assets.h
$(BUILD)/gen/supervisor/console/console_assets.h: $(CONSOLE_ASSET_FILES) scripts/console-assets
	@mkdir -p $(@D)
	/usr/bin/python3 scripts/console-assets console $(CONSOLE_ASSET_FILES) > $@.tmp && mv $@.tmp $@
