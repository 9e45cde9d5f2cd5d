#ifndef LIVEDELIVERY_CSHIMS_RABBITMQ_H
#define LIVEDELIVERY_CSHIMS_RABBITMQ_H
// rabbitmq-c >= 0.12 moved its headers under rabbitmq-c/; Debian bookworm ships 0.11 (flat).
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#endif

#include <stdint.h>

/// amqp_login_with_properties() is variadic, which Swift cannot call. This wraps the
/// AMQP_SASL_METHOD_PLAIN form: (user, password) are the variadic arguments.
/// `properties` may be NULL (then only the library's default client properties are sent); a
/// "capabilities" table in it is merged with the library's own capabilities.
amqp_rpc_reply_t CShims_amqp_login_plain(amqp_connection_state_t _Nonnull state,
                                         const char *_Nonnull vhost,
                                         int channel_max,
                                         int frame_max,
                                         int heartbeat,
                                         const amqp_table_t *_Nullable properties,
                                         const char *_Nonnull user,
                                         const char *_Nonnull password);

// Method numbers and property flags are cast/shift macros; re-export them as typed constants so the
// Swift side does not depend on how the importer treats each macro.
static const amqp_method_number_t CShims_amqp_CONNECTION_CLOSE = AMQP_CONNECTION_CLOSE_METHOD;
static const amqp_method_number_t CShims_amqp_CONNECTION_CLOSE_OK = AMQP_CONNECTION_CLOSE_OK_METHOD;
static const amqp_method_number_t CShims_amqp_CONNECTION_BLOCKED = AMQP_CONNECTION_BLOCKED_METHOD;
static const amqp_method_number_t CShims_amqp_CONNECTION_UNBLOCKED = AMQP_CONNECTION_UNBLOCKED_METHOD;
static const amqp_method_number_t CShims_amqp_CHANNEL_CLOSE = AMQP_CHANNEL_CLOSE_METHOD;
static const amqp_method_number_t CShims_amqp_CHANNEL_CLOSE_OK = AMQP_CHANNEL_CLOSE_OK_METHOD;
static const amqp_method_number_t CShims_amqp_CHANNEL_FLOW = AMQP_CHANNEL_FLOW_METHOD;
static const amqp_method_number_t CShims_amqp_BASIC_DELIVER = AMQP_BASIC_DELIVER_METHOD;
static const amqp_method_number_t CShims_amqp_BASIC_RETURN = AMQP_BASIC_RETURN_METHOD;
static const amqp_method_number_t CShims_amqp_BASIC_ACK = AMQP_BASIC_ACK_METHOD;
static const amqp_method_number_t CShims_amqp_BASIC_NACK = AMQP_BASIC_NACK_METHOD;
static const amqp_method_number_t CShims_amqp_BASIC_CANCEL = AMQP_BASIC_CANCEL_METHOD;
static const amqp_method_number_t CShims_amqp_BASIC_CANCEL_OK = AMQP_BASIC_CANCEL_OK_METHOD;

static const amqp_flags_t CShims_amqp_BASIC_CONTENT_TYPE_FLAG = AMQP_BASIC_CONTENT_TYPE_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_CONTENT_ENCODING_FLAG = AMQP_BASIC_CONTENT_ENCODING_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_HEADERS_FLAG = AMQP_BASIC_HEADERS_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_DELIVERY_MODE_FLAG = AMQP_BASIC_DELIVERY_MODE_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_PRIORITY_FLAG = AMQP_BASIC_PRIORITY_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_CORRELATION_ID_FLAG = AMQP_BASIC_CORRELATION_ID_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_REPLY_TO_FLAG = AMQP_BASIC_REPLY_TO_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_EXPIRATION_FLAG = AMQP_BASIC_EXPIRATION_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_MESSAGE_ID_FLAG = AMQP_BASIC_MESSAGE_ID_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_TIMESTAMP_FLAG = AMQP_BASIC_TIMESTAMP_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_TYPE_FLAG = AMQP_BASIC_TYPE_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_USER_ID_FLAG = AMQP_BASIC_USER_ID_FLAG;
static const amqp_flags_t CShims_amqp_BASIC_APP_ID_FLAG = AMQP_BASIC_APP_ID_FLAG;

#endif
