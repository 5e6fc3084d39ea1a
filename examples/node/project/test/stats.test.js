const test = require("node:test");
const assert = require("node:assert");
const { mean } = require("../src/stats.js");

test("the mean of three numbers", () => assert.strictEqual(mean([2, 4, 6]), 4));
test("the mean of one number is that number", () => assert.strictEqual(mean([5]), 5));
