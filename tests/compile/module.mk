# tests/compile: compile-property, the compiler's property test (table lookup == cedar_authorize).
PROGRAMS += compile-property
compile-property_SOURCES := tests/compile/property.c
