export { Tokenizer, TokenType, type TokenizerSpec, type TokenizerModelName, type EncodeOptions, type DecodeOptions } from './tokenizer.ts';
export { IncrementalDetokenizer } from './incremental-detokenizer.ts';
export { TokenIds } from './token-ids.ts';
export { TokenizerError, type TokenizerErrorCode } from './tokenizer-errors.ts';
export { preTokenize, PRE_TOKENIZER_NAMES, isPreTokenizerName, type PreTokenizerName } from './pre-tokenizer.ts';
export { BYTE_TO_UNICODE, byteEncode, byteDecode } from './byte-unicode.ts';
export { trainByteLevelBpe, trainSpmBpe, type ByteLevelVocab, type SpmVocab } from './bpe-trainer.ts';
export { importHfTokenizer, importHfTokenizerDir, detectHfPreTokenizer, type HfImportOptions, type HfVocabImport, type HfModelConfig, type HfAddedToken } from './hf-tokenizer-import.ts';
