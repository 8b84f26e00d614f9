// Upload one file with tus-js-client 4 (Node), resuming through cuts by its own retries.
// Usage: node tus_upload.cjs <endpoint> <file> <token> <metadata-json> <chunk-size|0>
// Prints one JSON line per reply it got, then {"done": url} or {"failed": message}.
"use strict";
const fs = require("fs");
const { Upload } = require("tus-js-client");

const [endpoint, file, token, metadataJson, chunkText] = process.argv.slice(2);
const chunkSize = Number(chunkText) > 0 ? Number(chunkText) : Infinity;
const say = (entry) => process.stdout.write(JSON.stringify(entry) + "\n");

const upload = new Upload(fs.readFileSync(file), {
  endpoint,
  chunkSize,
  metadata: JSON.parse(metadataJson),
  headers: { Authorization: `Bearer ${token}` },
  retryDelays: [0, 100, 200, 400, 800, 1000, 1000, 1000],
  storeFingerprintForResuming: false,
  onAfterResponse(req, res) {
    say({
      method: req.getMethod(),
      status: res.getStatus(),
      offset: res.getHeader("Upload-Offset") ?? null,
    });
  },
  onError(error) {
    say({ failed: String(error) });
    process.exit(1);
  },
  onSuccess() {
    say({ done: upload.url });
  },
});
upload.start();
