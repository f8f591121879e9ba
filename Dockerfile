# The gate server image: `rnx serve` with the [server] extra only (no torch, no harness).
# Build: docker build -t rnx-gate .
# Run:   docker run -p 8000:8000 -v rnx-data:/data rnx-gate
#        (PostgreSQL: -e RNX_DATABASE_URL=postgresql+psycopg://user:pass@db:5432/rnx)
FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Only what the server needs; bench_runner and action are left out of the image.
COPY pyproject.toml README.md constraints.txt ./
COPY rnx ./rnx
COPY rnx_github ./rnx_github
COPY rnx_cli ./rnx_cli
COPY stats ./stats
COPY gate_server ./gate_server
RUN pip install --no-cache-dir -c constraints.txt '.[server]' \
    && rm -rf /src \
    && useradd --system --uid 10001 --create-home --home-dir /data rnx

# The default database is a SQLite file in /data (mount a volume there to keep it).
ENV RNX_DATABASE_URL=sqlite:////data/rnx-gate.db
WORKDIR /data
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=3)"]
ENTRYPOINT ["rnx", "serve", "--host", "0.0.0.0", "--port", "8000"]
