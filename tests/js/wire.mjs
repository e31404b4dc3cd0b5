// The tagged form of tests/wire.py, read as the page reads it (assets/wire.js).
export { decode, decodeRows } from "../../src/pytest_heron/browser/assets/wire.js";
