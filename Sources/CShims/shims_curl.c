#include "CShimsCurl.h"
