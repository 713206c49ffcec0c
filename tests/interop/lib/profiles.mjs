// lib/profiles.mjs: the OTLP profiles request the interop tests send: one
// service, two samples over a two-frame stack (handleRequest in app.js
// under main in the binary), the first linked to a span and labelled with
// an attribute. A plain object; pass it to the request type's fromObject.
//   scope                the instrumentation scope's name
//   binary               the main mapping's file name
//   sampleTimeNs/startNs the first sample's timestamp and the profile's
//                        start (strings of ns; default: now and 10 s ago)
//   secondValues         the second sample's values
//   profileAttributeIndices  attributes of the profile itself (optional)
const hex = (h) => Buffer.from(h, 'hex');

export function profilesObject(service, {
  scope, binary = '/usr/bin/node', sampleTimeNs, startNs, secondValues = [20000000],
  profileAttributeIndices,
} = {}) {
  const profile = {
    sampleType: { typeStrindex: 3, unitStrindex: 4 },
    samples: [
      { stackIndex: 1, values: [10000000], linkIndex: 1,
        timestampsUnixNano: [sampleTimeNs ?? String(BigInt(Date.now()) * 1000000n)], attributeIndices: [1] },
      { stackIndex: 2, values: secondValues },
    ],
    timeUnixNano: startNs ?? String(BigInt(Date.now() - 10000) * 1000000n),
    durationNano: '10000000000',
    periodType: { typeStrindex: 3, unitStrindex: 4 },
    period: '10000000',
    profileId: hex('0102030405060708090a0b0c0d0e0f10'),
  };
  if (profileAttributeIndices) profile.attributeIndices = profileAttributeIndices;
  return {
    resourceProfiles: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
      scopeProfiles: [{ scope: { name: scope, version: '0.1' }, profiles: [profile] }],
    }],
    dictionary: {
      mappingTable: [{}, { memoryStart: '4096', memoryLimit: '8192', filenameStrindex: 5 }],
      locationTable: [{}, { mappingIndex: 1, address: '4660', lines: [{ functionIndex: 1, line: '42', column: '7' }] },
        { lines: [{ functionIndex: 2, line: '9' }] }],
      functionTable: [{}, { nameStrindex: 1, filenameStrindex: 2, startLine: '40' }, { nameStrindex: 6, systemNameStrindex: 6, filenameStrindex: 2 }],
      linkTable: [{}, { traceId: hex('0af7651916cd43dd8448eb211c80319c'), spanId: hex('b7ad6b7169203331') }],
      stringTable: ['', 'handleRequest', 'app.js', 'cpu', 'nanoseconds', binary, 'main'],
      attributeTable: [{}, { keyStrindex: 1, value: { stringValue: 'GET /cart' } }],
      stackTable: [{}, { locationIndices: [1, 2] }, { locationIndices: [2] }],
    },
  };
}
