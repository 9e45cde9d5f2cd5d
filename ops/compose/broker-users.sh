#!/bin/sh
# compose.yaml's broker users, made through the management API with the administrator's login (which only the
# management UI keeps using). Each has only what it needs (configure / write / read, as regular expressions
# over exchange and queue names, in the vhost /):
#   livedelivery_worker     the workers and migrate: the exchanges and queues they declare, bind, consume and
#                           publish to (delivery.events, .cells, .dlx; livedelivery.events, .dead-letter)
#   livedelivery_publisher  the publisher: write on the topic exchange only, so it can neither declare nor
#                           read anything, nor place an order in a cell's queue directly
set -eu
api=http://rabbitmq:15672/api
put() {  # PATH JSON
    curl -fsS -o /dev/null --retry 30 --retry-connrefused --retry-delay 1 -u "$BROKER_ADMIN_USER:$BROKER_ADMIN_PASSWORD" \
        -H 'content-type: application/json' -X PUT "$api/$1" -d "$2"
}
topology='^(delivery\\.events(\\.cells|\\.dlx)?|livedelivery\\.events(\\.dead-letter)?)$'
put users/livedelivery_worker "{\"password\":\"$BROKER_WORKER_PASSWORD\",\"tags\":\"\"}"
put permissions/%2F/livedelivery_worker "{\"configure\":\"$topology\",\"write\":\"$topology\",\"read\":\"$topology\"}"
put users/livedelivery_publisher "{\"password\":\"$BROKER_PUBLISHER_PASSWORD\",\"tags\":\"\"}"
put permissions/%2F/livedelivery_publisher '{"configure":"^$","write":"^delivery\\.events$","read":"^$"}'
echo "broker-users: livedelivery_worker and livedelivery_publisher are set"
