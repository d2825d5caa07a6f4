// flashspec's CPU kernel: one shared library, built on first use (flashspec/kernel/build.py).
// One translation unit: layer.c's decoder layers call rows.c's products and helpers, which are
// static; both sum in lanes.c's sixteen lanes.
#include "lanes.c"
#include "rows.c"
#include "layer.c"
