PROGRAMS += cedar-conformance
cedar-conformance_SOURCES := tests/conformance/cedar-conformance.c
