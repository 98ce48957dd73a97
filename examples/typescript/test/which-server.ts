// `npm test` runs this first, so that the first line of its output names the server the
// results are about (see locateServer in server.ts).

import { describeServer } from "./server.js";

console.log(describeServer());
