// Verdaccio for the consumer test: `node registry.mjs <config.yaml>` listens on 127.0.0.1 at a port the
// kernel picks and prints {"port": N} on its first line once it does.
import { runServer } from "verdaccio"

const server = await runServer(process.argv[2])
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: server.address().port })))
