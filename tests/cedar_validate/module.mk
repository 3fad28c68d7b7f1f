# Checker of dome's Cedar validator against cedar-integration-tests (shouldValidate, validateRequest) and
# batch mode for the differential test against cedar-wasm.
PROGRAMS += cedar-validate-check
cedar-validate-check_SOURCES := tests/cedar_validate/cedar-validate-check.c
