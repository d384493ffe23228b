// What the KDA chunk kernels' op_host files share (CANN's operator project; not compiled here, as op_host is
// not): the shape of a call read from q and v, the tiling key of the transfer type, the outputs' shapes and
// types, and the operator's tensors. FLA's layout: q, k [B, T, H, K] and v [B, T, H, V] in the transfer type;
// g [B, T, H, K], beta [B, T, H] and the optional h0 [B, H, K, V] in fp32; o [B, T, H, V] and ht [B, H, K, V]
// in fp32.
#pragma once
#include <vector>
#include "kda_tiling_common.h"
#include "register/op_def_registry.h"

namespace optiling {
// The transfer types a kernel takes: fp32 and bf16, and fp16 where `fp16Ok`.
inline bool KdaTransferTypeOk(ge::DataType dtype, bool fp16Ok)
{
    return dtype == ge::DT_FLOAT || dtype == ge::DT_BF16 || (fp16Ok && dtype == ge::DT_FLOAT16);
}
// The call's shape: q [B, T, H, K], v [B, T, H, V]; h0 is input 5.
inline KdaShape KdaShapeOf(gert::TilingContext* context, const gert::Shape& q, const gert::Shape& v,
                           ge::DataType dtype, int64_t chunk, bool gateIsLog, float scale, uint32_t slots)
{
    KdaShape shape{};
    shape.batch = static_cast<uint32_t>(q.GetDim(0));
    shape.seqLen = static_cast<uint32_t>(q.GetDim(1));
    shape.heads = static_cast<uint32_t>(q.GetDim(2));
    shape.dk = static_cast<uint32_t>(q.GetDim(3));
    shape.dv = static_cast<uint32_t>(v.GetDim(3));
    shape.chunk = static_cast<uint32_t>(chunk);
    shape.transferBytes = dtype == ge::DT_FLOAT ? 4 : 2;
    shape.fp16 = dtype == ge::DT_FLOAT16;
    shape.hasInitialState = context->GetOptionalInputShape(5) != nullptr;
    shape.gateIsLog = gateIsLog;
    shape.scale = scale;
    shape.slots = slots;
    return shape;
}
// The kernel's branch for the transfer type (kda_tiling_common.h's keys).
inline uint64_t KdaTilingKey(ge::DataType dtype)
{
    return dtype == ge::DT_FLOAT ? KDA_TILING_KEY_FP32 : dtype == ge::DT_FLOAT16 ? KDA_TILING_KEY_FP16 : KDA_TILING_KEY_BF16;
}
}  // namespace optiling

namespace ge {
inline ge::graphStatus KdaInferShape(gert::InferShapeContext* context)
{
    const gert::Shape* q = context->GetInputShape(0);
    const gert::Shape* v = context->GetInputShape(2);
    *context->GetOutputShape(0) = *v;                  // o: [B, T, H, V]
    gert::Shape* ht = context->GetOutputShape(1);      // ht: [B, H, K, V]
    ht->SetDimNum(4);
    ht->SetDim(0, q->GetDim(0));
    ht->SetDim(1, q->GetDim(2));
    ht->SetDim(2, q->GetDim(3));
    ht->SetDim(3, v->GetDim(3));
    return GRAPH_SUCCESS;
}
inline ge::graphStatus KdaInferDataType(gert::InferDataTypeContext* context)
{
    context->SetOutputDataType(0, ge::DT_FLOAT);
    context->SetOutputDataType(1, ge::DT_FLOAT);
    return GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
// The operator's inputs and outputs, `transfer` the types q, k and v may take (one format entry per type).
inline void KdaDeclareTensors(OpDef& op, const std::vector<ge::DataType>& transfer)
{
    const std::vector<ge::Format> nd(transfer.size(), ge::FORMAT_ND);
    const std::vector<ge::DataType> fp32(transfer.size(), ge::DT_FLOAT);
    op.Input("q").ParamType(REQUIRED).DataType(transfer).Format(nd).UnknownShapeFormat(nd);
    op.Input("k").ParamType(REQUIRED).DataType(transfer).Format(nd).UnknownShapeFormat(nd);
    op.Input("v").ParamType(REQUIRED).DataType(transfer).Format(nd).UnknownShapeFormat(nd);
    op.Input("g").ParamType(REQUIRED).DataType(fp32).Format(nd).UnknownShapeFormat(nd);
    op.Input("beta").ParamType(REQUIRED).DataType(fp32).Format(nd).UnknownShapeFormat(nd);
    op.Input("h0").ParamType(OPTIONAL).DataType(fp32).Format(nd).UnknownShapeFormat(nd);
    op.Output("o").ParamType(REQUIRED).DataType(fp32).Format(nd).UnknownShapeFormat(nd);
    op.Output("ht").ParamType(REQUIRED).DataType(fp32).Format(nd).UnknownShapeFormat(nd);
}
}  // namespace ops
