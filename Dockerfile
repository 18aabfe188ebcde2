# One image for every kvtier role (api, worker, gc); the compose file picks the command.
FROM node:20-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ make python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
COPY native ./native
RUN npm ci
COPY . .
# The JavaScript build of the sources (src/compiled-js.mjs), so a container starts without compiling
RUN node src/compiled-js.mjs
ENV HOST=0.0.0.0 PORT=8080 KVTIER_DATA_DIR=/var/lib/kvtier
EXPOSE 8080
ENTRYPOINT ["node", "bin/kvtier.js"]
CMD ["serve"]
