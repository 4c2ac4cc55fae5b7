# The tribunal worker image used by docker-compose.yml (Kafka and ZooKeeper come from their own images).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY streams ./streams
COPY schemas ./schemas
RUN pip install --no-cache-dir .
ENTRYPOINT []
CMD ["tribunal", "worker"]
