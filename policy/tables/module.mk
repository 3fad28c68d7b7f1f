# policy/tables — the decision tables the Cedar→kernel compiler produces and the kernel loader, the
# egress plan and Landlock consume (public header tables.h).
LIBRARY_DIRS += policy/tables
