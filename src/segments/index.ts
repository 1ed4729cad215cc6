export * from './format';
export * from './merge';
