/* library.h -- each vendor-library provider (lib/lib.h) as a template: its space is one knob,
 * "algo", whose values number the provider's configs for the node, so the tuner measures them
 * and the records hold them like any generated config. */
#ifndef WPK_TUNE_TEMPLATES_LIBRARY_H
#define WPK_TUNE_TEMPLATES_LIBRARY_H

#include "kernels/provider.h"

/* One template per built-in provider, in lib_providers() order, NULL-terminated. */
const kernel_provider *const *kernel_library_providers(void);

#endif
