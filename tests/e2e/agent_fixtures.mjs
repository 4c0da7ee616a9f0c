// Schemas and tools that the agent e2e suites share: a JSON schema the
// embedded model does not fit unconstrained, and two function tools in chat's
// nested shape (the Responses API takes them flat: see flatTool).

export const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 24 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    languages: { type: 'array', items: { type: 'string', enum: ['python', 'c', 'rust'] }, minItems: 1, maxItems: 3 },
  },
  required: ['name', 'age', 'languages'],
  additionalProperties: false,
};

export const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 20 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};
export const SEARCH = {
  type: 'function',
  function: {
    name: 'search_docs',
    parameters: { type: 'object', properties: { query: { type: 'string', maxLength: 30 } }, required: ['query'] },
  },
};

// A chat tool as the Responses API spells it: {type, name, description, parameters}.
export const flatTool = (tool) => ({ type: 'function', ...tool.function });
