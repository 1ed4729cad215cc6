#!/usr/bin/env node
/** The `compaction-lease` executable: configured by the environment, exit codes as `--help` lists them. */
import { contextFromEnv } from './context';
import { runCli } from './program';

void runCli(process.argv.slice(2), contextFromEnv()).then((code) => {
  process.exitCode = code;
});
