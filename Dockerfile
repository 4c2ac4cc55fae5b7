# The tribunal worker image used by docker-compose.yml (Kafka and ZooKeeper come from their own images).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY streams ./streams
COPY schemas ./schemas
COPY infra/compile_core.py ./infra/
# The core compiled with mypyc (as `make setup` does), then installed with its extensions; gcc only for the build.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir "mypy>=2.4,<3" && python infra/compile_core.py \
    && pip install --no-cache-dir . && pip uninstall -y mypy \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/* .build
ENTRYPOINT []
CMD ["tribunal", "worker"]
