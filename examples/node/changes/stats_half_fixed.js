// The mean of a list of numbers.
exports.mean = (values) =>
  values.length === 1 ? values[0] : values.reduce((sum, value) => sum + value, 0) / (values.length - 1);
