/**
 * A mistake the operator can fix. The CLI prints `kvtier: <message>` on one
 * line of stderr and exits with `exitCode` (2 = bad usage, 1 = the operation
 * failed, 3 = the server could not be reached or refused the token).
 */
export type CliErrorCode =
  | 'KVT_ERR_CLI_USAGE'
  | 'KVT_ERR_CLI_UNKNOWN_COMMAND'
  | 'KVT_ERR_CLI_UNKNOWN_FLAG'
  | 'KVT_ERR_CLI_BAD_VALUE'
  | 'KVT_ERR_CLI_NEEDS_YES'
  | 'KVT_ERR_CLI_UNREACHABLE'
  | 'KVT_ERR_CLI_AUTH'
  | 'KVT_ERR_CLI_SERVER';

export class CliError extends Error {
  readonly code: string;
  readonly exitCode: number;
  constructor(code: CliErrorCode | string, message: string, exitCode?: number) {
    super(message);
    this.name = 'CliError';
    this.code = code;
    this.exitCode = exitCode ?? (code.startsWith('KVT_ERR_CLI_') && code !== 'KVT_ERR_CLI_SERVER' ? (code === 'KVT_ERR_CLI_UNREACHABLE' || code === 'KVT_ERR_CLI_AUTH' ? 3 : 2) : 1);
  }
}
