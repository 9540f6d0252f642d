// Node's http module as most Node servers start: server.listen(port), no backlog option.
// Usage: node node_http.js PORT
const http = require("http");
const port = Number(process.argv[2]);
http.createServer((req, res) => res.end("ok\n")).listen(port, () => console.log(`listening ${port}`));
