// The mean of a list of numbers.
exports.mean = (values) => values.reduce((sum, value) => sum + value, 0) / (values.length - 1);
