#!/usr/bin/env node
// The shipped validator (examples/validator.py) written against the script contract alone,
// in JavaScript: no trysquare library, only the context file and the runner's suite socket.
// See docs/any-language.md.
//
// - delivered: the agent changed something that is not a by-product;
// - in_scope: everything it changed is inside SCOPE (a reason only on failure);
// - tests: the scenario's suite, asked of the runner (it runs the suite in the jail);
// - touched: every path the run changed, by-products included.
//
// Run by hand: examples/validator.mjs path/to/validation/script/context.json

import { readFileSync } from "node:fs";
import { connect } from "node:net";

const SCOPE = new Set(["counter.py"]);
const context = JSON.parse(readFileSync(process.argv[2], "utf8"));

// The artefact rule of docs/any-language.md: a pattern names a path when it matches the
// whole path, a leading part of it, or (without a "/") any one component. Enough for
// the patterns this example's scenario declares; trysquare.assay has the full rule.
function glob(pattern) {
  const source = pattern.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp(`^${source}$`);
}
function isArtefact(path, pattern) {
  const match = glob(pattern);
  const parts = path.split("/");
  return parts.some((part, i) => match.test(parts.slice(0, i + 1).join("/")) || match.test(part));
}

// The suite is the measured agent's code: only the runner runs it, in the jail. Under
// `trysquare validate` it listens on TRYSQUARE_SUITE_SOCKET: one JSON line asked,
// {"value": true|false|null, "reason": "..."} answered.
function tests(timeoutSeconds = 600) {
  const socket = process.env.TRYSQUARE_SUITE_SOCKET;
  if (context.test_command === undefined) {
    return Promise.resolve({ value: null, reason: "the scenario declares no test_command" });
  }
  if (!socket) {
    return Promise.resolve({
      value: null,
      reason: "run by hand: no runner to ask (trysquare validate runs the suite in the jail)",
    });
  }
  return new Promise((resolve) => {
    const chunks = [];
    const door = connect(socket, () => door.end(JSON.stringify({ timeout: timeoutSeconds }) + "\n"));
    door.on("data", (chunk) => chunks.push(chunk));
    door.on("error", (error) =>
      resolve({ value: null, reason: `the runner did not answer (${error.message})` }),
    );
    door.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      } catch {
        resolve({ value: null, reason: "the runner's answer is not JSON" });
      }
    });
  });
}

const touched = context.touched;
const work = touched.filter((path) => !context.artefacts.some((p) => isArtefact(path, p)));
const outside = work.filter((path) => !SCOPE.has(path)).sort();
const suite = await tests();

const metrics = {
  delivered: work.length > 0,
  in_scope: outside.length === 0,
  tests: suite.value,
  touched,
};
const reasons = {};
if (outside.length > 0) reasons.in_scope = `also touched ${outside.join(", ")}`;
if (suite.reason) reasons.tests = suite.reason; // an unjudged metric (null) must say why
process.stdout.write(JSON.stringify({ metrics, reasons }));
