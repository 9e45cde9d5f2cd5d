#ifndef LIVEDELIVERY_CSHIMS_H
#define LIVEDELIVERY_CSHIMS_H
// Non-variadic wrappers and macro values that Swift cannot import directly.
// Every exported symbol is prefixed CShims_.
#include "CShimsRabbitMQ.h"
#include "CShimsPQ.h"
#include "CShimsCurl.h"
#endif
