#include "CShimsPQ.h"
