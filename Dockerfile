# synapse serve in a container (deploy/README.md): Debian 12, built from this
# tree in one stage, run from a slim one as an unprivileged user, the model
# mounted read-only under /models.
#
#   docker build -t synapse --build-arg SYNAPSE_GIT_COMMIT=$(git describe --always --dirty) \
#       --build-arg SYNAPSE_BUILD_NUMBER=$(git rev-list --count HEAD) .
#   docker run --rm -p 8080:8080 -v "$PWD/models:/models:ro" synapse \
#       -m /models/stories260K.gguf --alias stories -np 4 -t 4 --metrics

FROM debian:bookworm-slim AS build
# The build packages of scripts/setup.sh, less those for tests and Python.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake g++ make pkg-config libpcre2-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# .dockerignore lets in only what the build reads.
COPY . .
# The commit and build number synapse reports (/props build_info,
# system_fingerprint "b<number>-<commit>"): the context has no .git.
ARG SYNAPSE_GIT_COMMIT=unknown
ARG SYNAPSE_BUILD_NUMBER=0
# One binary for any CPU of the architecture: kernels are picked at run time.
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSYNAPSE_GIT_COMMIT="$SYNAPSE_GIT_COMMIT" \
      -DSYNAPSE_BUILD_NUMBER="$SYNAPSE_BUILD_NUMBER" \
      -DSYNAPSE_BUILD_TESTS=OFF -DSYNAPSE_BUILD_BENCHMARKS=OFF -DSYNAPSE_BUILD_EXAMPLES=OFF \
 && cmake --build build -j"$(nproc)" --target synapse \
 && strip build/synapse

FROM debian:bookworm-slim
# What the binary links beyond libc and libstdc++ (ldd): cpp-httplib (with its
# OpenSSL, zlib and brotli) and PCRE2.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libcpp-httplib0.11 libpcre2-8-0 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 synapse \
 && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin synapse
COPY --from=build /src/build/synapse /usr/local/bin/synapse
USER 10001:10001
EXPOSE 8080
# 200 from /health once the model is loaded (503 while it loads). bash's
# /dev/tcp, as the slim image has no curl.
HEALTHCHECK --interval=10s --timeout=3s --start-period=300s --retries=3 CMD ["bash", "-c", \
  "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && read -r _ code _ <&3 && [ \"$code\" = 200 ]"]
ENTRYPOINT ["/usr/local/bin/synapse", "serve", "--host", "0.0.0.0", "--port", "8080"]
# The arguments after the image name replace these.
CMD ["-m", "/models/model.gguf", "--metrics"]
