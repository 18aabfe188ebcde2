/** A model loaded for one request and disposed after it, so a long-lived llama.cpp process holds no file between requests. */
export async function withModel(llama, modelPath, vocabOnly, work) {
  const model = await llama.loadModel({ modelPath, gpuLayers: 0, vocabOnly });
  try {
    return await work(model);
  } finally {
    await model.dispose();
  }
}
