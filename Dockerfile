# One image for the livedelivery worker, apns-sim and the test runner. .dockerignore keeps build
# folders, local state, keys and .git out of the context.
FROM swift:6.3-bookworm AS build
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
        pkg-config librabbitmq-dev libpq-dev libcurl4-openssl-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
# The worker with its OTLP trace export (the package trait OTLP; docs/operations.md, Exporting them over OTLP).
RUN swift build -c release --traits OTLP --product livedelivery && swift build -c release --traits OTLP --product apns-sim \
    && mkdir /out && cp "$(swift build -c release --show-bin-path)"/livedelivery \
       "$(swift build -c release --show-bin-path)"/apns-sim /out/

FROM swift:6.3-bookworm-slim
# curl: the compose healthcheck asks /readyz with it.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
        librabbitmq4 libpq5 libcurl4 ca-certificates openssl curl && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
COPY Config /etc/livedelivery/Config
COPY sql /etc/livedelivery/sql
# The example events, for compose's one-shot publisher.
COPY examples /etc/livedelivery/examples
WORKDIR /etc/livedelivery
USER nobody
ENTRYPOINT ["livedelivery"]
CMD ["run"]
