#include "CShimsRabbitMQ.h"
