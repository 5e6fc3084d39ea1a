#!/usr/bin/env node
// The Node example's validator, in JavaScript, against the script contract alone
// (docs/any-language.md): the context file, the runner's suite socket, the session's reading.
//
// - delivered: the agent changed something;
// - in_scope: everything it changed is under src/ (a reason only on failure);
// - tests: the scenario's suite (`node --test`), asked of the runner, which runs it in the jail;
// - installed_a_dependency: the first call of the agent's session that wrote package.json ran a
//   command (`npm install X`, `yarn add X`), not an edit; unjudged, with the reason, where the
//   session cannot tell.
//
// Run by hand: examples/node/validator.mjs path/to/validation/script/context.json

import { readFileSync } from "node:fs";
import { connect } from "node:net";

const SCOPE = "src/";
const context = JSON.parse(readFileSync(process.argv[2], "utf8"));

function tests(timeoutSeconds = 600) {
  const socket = process.env.TRYSQUARE_SUITE_SOCKET;
  if (!socket) {
    return Promise.resolve({ value: null, reason: "run by hand: no runner to ask" });
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

// Which call first wrote package.json, from the session's reading (null: no session).
function manifestWrite() {
  if (!context.session_facts) return { value: null, reason: "the run has no session log" };
  const facts = JSON.parse(readFileSync(context.session_facts, "utf8"));
  if (facts.unjudged) return { value: null, reason: facts.unjudged };
  const unclear = (facts.first_write_unjudged || {})["package.json"];
  if (unclear) return { value: null, reason: unclear };
  const call = (facts.first_write || {})["package.json"];
  if (call === undefined || call === null) return { value: false, reason: "" };
  const first = facts.tool_calls[call];
  // A shell call that writes the manifest is a package manager's (`npm install X`, `yarn add`):
  // the session readers count those as writes of package.json and its lockfile.
  if (!first.shell) return { value: false, reason: `call ${call} (${first.name}) edited package.json` };
  return { value: true, reason: `call ${call} (${first.name}) wrote package.json first` };
}

const outside = context.touched.filter((path) => !path.startsWith(SCOPE)).sort();
const suite = await tests();
const manifest = manifestWrite();

const metrics = {
  delivered: context.touched.length > 0,
  in_scope: outside.length === 0,
  tests: suite.value,
  installed_a_dependency: manifest.value,
};
const reasons = {};
if (outside.length > 0) reasons.in_scope = `also touched ${outside.join(", ")}`;
if (suite.reason) reasons.tests = suite.reason; // an unjudged metric (null) must say why
if (manifest.reason) reasons.installed_a_dependency = manifest.reason;
process.stdout.write(JSON.stringify({ metrics, reasons }));
