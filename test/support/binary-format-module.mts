/**
 * The binary format as a format module (docs/plugins.md): what `compaction-lease worker --format`
 * and `COMPACTION_FORMAT_MODULE` load, its plug-ins as the named exports a worker looks for.
 */
export { binaryCompactor as compactor, textRootCodec as rootCodec } from './binary-format';
