// What the command line says about lint before lint itself is loaded (its help and the -o
// choices): `serve` and `--help` read these without loading the YAML parser.
export const MAX_FILE_BYTES = 8 * 1024 * 1024;

export const OUTPUT_FORMATS = ['text', 'json', 'sarif'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];
