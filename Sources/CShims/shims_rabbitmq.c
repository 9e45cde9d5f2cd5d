#include "CShimsRabbitMQ.h"

_Static_assert(sizeof(amqp_method_number_t) == sizeof(uint32_t), "amqp_method_number_t is 32 bits");

amqp_rpc_reply_t CShims_amqp_login_plain(amqp_connection_state_t state,
                                         const char *vhost,
                                         int channel_max,
                                         int frame_max,
                                         int heartbeat,
                                         const amqp_table_t *properties,
                                         const char *user,
                                         const char *password) {
    if (properties == NULL) {
        return amqp_login(state, vhost, channel_max, frame_max, heartbeat, AMQP_SASL_METHOD_PLAIN, user, password);
    }
    return amqp_login_with_properties(state, vhost, channel_max, frame_max, heartbeat, properties,
                                      AMQP_SASL_METHOD_PLAIN, user, password);
}
