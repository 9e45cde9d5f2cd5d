#ifndef LIVEDELIVERY_CRABBITMQ_SHIM_H
#define LIVEDELIVERY_CRABBITMQ_SHIM_H
// rabbitmq-c >= 0.12 moved its headers under rabbitmq-c/; Debian bookworm ships 0.11 (flat).
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/tcp_socket.h>
#include <rabbitmq-c/ssl_socket.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <amqp_ssl_socket.h>
#endif
#endif
