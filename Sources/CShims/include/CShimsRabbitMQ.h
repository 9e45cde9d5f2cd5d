#ifndef LIVEDELIVERY_CSHIMS_RABBITMQ_H
#define LIVEDELIVERY_CSHIMS_RABBITMQ_H
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#endif

#endif
