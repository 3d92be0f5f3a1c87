// @ts-check
// The receiver of the `http-request` scenario's webhooks: an HTTP/1.1 server with keep-alive that reads
// each request's body and answers 204. GET /count answers the number of requests received so far.
//   node bench/http-sink.mjs <port>      prints "listening <port>" once bound
import http from "node:http";

const port = Number(process.argv[2] ?? 0);
let received = 0;
const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  if (req.method === "GET" && req.url === "/count") {
    res.writeHead(200, { "content-type": "text/plain" }).end(String(received));
    return;
  }
  req.resume();
  req.on("end", () => {
    received++;
    res.writeHead(204).end();
  });
});
server.listen(port, "127.0.0.1", () => {
  const address = server.address();
  console.log(`listening ${typeof address === "object" && address ? address.port : port}`);
});
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
